import { KnownFiles, type Known } from './file-index.js';

const file = (ino: number, size: number): Known => ({ sha256: 'x'.repeat(64), size, mtimeMs: 1, ino });

describe('KnownFiles: logical bytes', () => {
  it('sums sizes, follows changes and removals, and counts an inode with several names once', () => {
    const known = new KnownFiles();
    known.set('code/a', file(1, 100));
    known.set('code/b', file(2, 50));
    expect(known.bytes).toBe(150);
    known.set('code/link-to-a', file(1, 100));
    expect(known.bytes).toBe(150);
    known.set('code/a', file(1, 300)); // grew (seen through one of its names)
    expect(known.bytes).toBe(350);
    known.delete('code/a');
    expect(known.bytes).toBe(350); // still linked as code/link-to-a
    known.delete('code/link-to-a');
    expect(known.bytes).toBe(50);
    known.set('code/b', file(3, 70)); // replaced by another file
    expect(known.bytes).toBe(70);
    known.delete('code/b');
    expect(known.bytes).toBe(0);
  });

  it('tells what the total would be with a size not yet indexed', () => {
    const known = new KnownFiles();
    known.set('a', file(1, 100));
    known.set('b', file(2, 10));
    known.set('c', file(2, 10));
    expect(known.bytesWith('a', 1, 1000)).toBe(1010); // a grew
    expect(known.bytesWith('a', 9, 1000)).toBe(1010); // a replaced: its old inode had no other name
    expect(known.bytesWith('b', 9, 1000)).toBe(1110); // b replaced: its old inode is still c
    expect(known.bytesWith('new', 2, 10)).toBe(110); // another link to a known inode
    expect(known.bytes).toBe(110);
  });
});
