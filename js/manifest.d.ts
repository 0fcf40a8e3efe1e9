/**
 * docmem/manifest (Node): write the model manifest of a folder of models.
 * @module docmem/manifest
 */
import type { ModelManifest } from './index.js';

/** Options of {@link makeManifest}. */
export interface MakeManifestOptions {
  /** Where the folder will be served (default: URLs relative to the manifest, served from the folder itself). */
  baseUrl?: string;
  /** The GGUF file to read and answer with (default: the first by name). */
  reader?: string;
  /** A file's hex sha256 (default: read and hashed 4 MiB at a time). */
  hash?: (file: string) => string | Promise<string>;
  /** Per GGUF file, the label and note its entry in `choices` shows, and what is known of its memories. */
  labels?: Record<string, { label?: string; note?: string; memories?: MemoryEvidence }>;
}

/** What held-out articles showed of a model's memories against sentence chunks. */
export interface MemoryEvidence {
  /** Whether its memories answered better than sentence chunks (a page turns background memories on by default only then). */
  pays: boolean;
  /** The measurement, in a sentence a page can show. */
  evidence: string;
}

/** One language model a page may offer: the `choices` of a manifest. */
export interface ModelChoice {
  id: string;
  name: string;
  label: string;
  note: string;
  /** What is known of its memories, when measured. */
  memories?: MemoryEvidence;
  size: number;
  default: boolean;
  files: import('./index.js').ModelFile[];
}

/**
 * The manifest of the models in `dir` (Node only): one embedder folder (config.json,
 * tokenizer.json, model.safetensors) and one or more .gguf files.
 */
export declare function makeManifest(dir: string, options?: MakeManifestOptions): Promise<ModelManifest & { choices: ModelChoice[] }>;

/** A file's hex sha256, read 4 MiB at a time. */
export declare function sha256File(file: string): Promise<string>;
