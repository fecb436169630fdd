# Prints every open, read and listing of a directory and of the files in it (inotify IN_OPEN |
# IN_ACCESS), by anyone, as "<mask> <name>" lines. Prints "ready" once the watch is in place.
# argv: <directory>. Runs until killed.
import ctypes
import os
import struct
import sys

IN_ACCESS, IN_OPEN = 0x1, 0x20
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
if fd < 0 or libc.inotify_add_watch(fd, sys.argv[1].encode(), IN_ACCESS | IN_OPEN) < 0:
    sys.exit('inotify: errno %d' % ctypes.get_errno())
print('ready', flush=True)
while True:
    data = os.read(fd, 65536)
    at = 0
    while at < len(data):
        _, mask, _, size = struct.unpack_from('iIII', data, at)
        name = data[at + 16:at + 16 + size].rstrip(b'\0').decode('utf8', 'replace')
        print(mask, name or '.', flush=True)
        at += 16 + size
