import { nodeResolve } from '@rollup/plugin-node-resolve';

export default {
  input: 'src/index.js',
  output: { dir: 'dist', format: 'es', entryFileNames: 'main.js' },
  plugins: [nodeResolve({ browser: true })],
};
