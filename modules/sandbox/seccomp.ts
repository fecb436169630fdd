/**
 * A tiny seccomp filter (classic BPF, as bwrap's `--seccomp FD` reads it) that refuses new user
 * namespaces: `unshare` and `clone` with CLONE_NEWUSER fail with EPERM, and `clone3`, whose flags a
 * classic filter cannot read, fails with ENOSYS so that libc falls back to `clone` (the approach of
 * container runtimes' default profiles). A root harness needs it: its sandbox is set up by root bwrap
 * and the agent dropped to its uid by setpriv, so bwrap's `--disable-userns` is not available.
 * Syscalls of another ABI (x32, 32-bit compat) are refused outright so they cannot bypass the numbers.
 */

interface Abi {
  /** AUDIT_ARCH_* of the native ABI. */
  arch: number;
  unshare: number;
  clone: number;
  clone3: number;
  /** Syscall numbers at or above this belong to another ABI sharing the arch value (x32). */
  foreignFrom?: number;
}

const ABIS: Partial<Record<NodeJS.Architecture, Abi>> = {
  x64: { arch: 0xc000003e, unshare: 272, clone: 56, clone3: 435, foreignFrom: 0x40000000 },
  arm64: { arch: 0xc00000b7, unshare: 97, clone: 220, clone3: 435 },
};

const CLONE_NEWUSER = 0x10000000;
const EPERM = 1;
const ENOSYS = 38;

// BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JSET_K = 0x45;
const RET_K = 0x06;
const ALLOW = 0x7fff0000;
const ERRNO = 0x00050000;

// Offsets in struct seccomp_data: nr, arch, then args[6] as u64 from 16 (little-endian: low word first).
const NR = 0;
const ARCH = 4;
const ARG0_LOW = 16;

type Instruction = [code: number, jt: number, jf: number, k: number];

/** The filter for this machine's ABI, or null where none is known (the sandbox then goes without). */
export function noNewUserNamespacesFilter(arch: NodeJS.Architecture = process.arch): Buffer | null {
  const abi = ABIS[arch];
  if (!abi) return null;
  const program: Instruction[] = [
    [LD_W_ABS, 0, 0, ARCH],
    [JEQ_K, 1, 0, abi.arch], // native ABI: go on
    [RET_K, 0, 0, ERRNO | ENOSYS],
    [LD_W_ABS, 0, 0, NR],
    [JGE_K, 0, 1, abi.foreignFrom ?? 0xffffffff], // x32 numbers
    [RET_K, 0, 0, ERRNO | ENOSYS],
    [JEQ_K, 0, 1, abi.clone3],
    [RET_K, 0, 0, ERRNO | ENOSYS],
    [JEQ_K, 1, 0, abi.unshare],
    [JEQ_K, 0, 3, abi.clone],
    [LD_W_ABS, 0, 0, ARG0_LOW], // unshare(flags) and clone(flags, …) both take the flags first
    [JSET_K, 0, 1, CLONE_NEWUSER],
    [RET_K, 0, 0, ERRNO | EPERM],
    [RET_K, 0, 0, ALLOW],
  ];
  const out = Buffer.alloc(program.length * 8);
  program.forEach(([code, jt, jf, k], i) => {
    out.writeUInt16LE(code, i * 8);
    out.writeUInt8(jt, i * 8 + 2);
    out.writeUInt8(jf, i * 8 + 3);
    out.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return out;
}
