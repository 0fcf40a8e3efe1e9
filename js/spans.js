// The library's spans are UTF-8 byte offsets (as in Rust); JavaScript strings index
// UTF-16 code units. One table per document text turns the one into the other.

/** A function from a byte offset of `text`'s UTF-8 encoding to its UTF-16 index. */
export function byteToUtf16(text) {
  const bytes = []; // byte offset at each code point start
  const units = []; // UTF-16 index there
  let b = 0;
  let u = 0;
  for (const ch of text) {
    bytes.push(b);
    units.push(u);
    const cp = ch.codePointAt(0);
    b += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    u += ch.length;
  }
  bytes.push(b);
  units.push(u);
  return (offset) => {
    let lo = 0;
    let hi = bytes.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (bytes[mid] <= offset) lo = mid;
      else hi = mid - 1;
    }
    return units[lo];
  };
}
