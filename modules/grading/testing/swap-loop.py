# An agent-like loop for the checkpoint-walk race spec: swaps parts of a checkpoint for symlinks to
# host places and back, in a tight loop, while the harness walks it. Works through directory
# descriptors (dir_fd=) so that its own renames never go through a link it planted.
# argv: <output dir> <held-out dir> <secret file> <seconds>. Waits for a line on stdin, then prints
# "swaps <n>" when done. Leaves the checkpoint as it found it.
import os
import random
import sys
import time

out, held_out, secret, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
out_fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
ck_fd = os.open('ck', os.O_RDONLY | os.O_DIRECTORY, dir_fd=out_fd)
swaps = [
    (out_fd, 'ck', held_out),  # the checkpoint itself
    (ck_fd, 'sub', held_out),  # a sub-directory, to the held-out folder
    (ck_fd, 'cfg', '/etc'),  # a sub-directory, to /etc
    (ck_fd, 'weights.json', os.path.join(held_out, 'weights.json')),  # a file, to the held-out answers
    (ck_fd, 'extra.bin', secret),
]
print('ready', flush=True)
sys.stdin.readline()
end = time.time() + seconds
n = 0
while time.time() < end:
    on = [s for s in swaps if random.random() < 0.4]
    for fd, name, target in on:
        os.rename(name, 'stash-' + name, src_dir_fd=fd, dst_dir_fd=out_fd)
        os.symlink(target, name, dir_fd=fd)
    for _ in range(random.randint(0, 3000)):
        pass
    for fd, name, _ in on:
        os.unlink(name, dir_fd=fd)
        os.rename('stash-' + name, name, src_dir_fd=out_fd, dst_dir_fd=fd)
    n += 1
    time.sleep(random.random() * 0.002)
print('swaps', n, flush=True)
