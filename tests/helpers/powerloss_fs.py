"""A FUSE file system that keeps what was not fsynced in memory and loses it on command, as a power loss does.

    python -m tests.helpers.powerloss_fs BACKING MOUNTPOINT     (tests drive it through powerloss_mount.py)

kill -9 of a broker keeps the kernel's page cache, so it never shows whether an fsync was missing. Here nothing
reaches the durable image without one, under the strictest POSIX reading:
- a file's data and size become durable only by fsync/fdatasync of that file;
- a directory entry (create, mkdir, rename, unlink, rmdir) becomes durable only by fsync of that directory: a
  file fsynced but whose create was never followed by a directory fsync is gone after a power loss, and a
  rename or unlink not followed by one is undone. A rename within one directory is one atomic change; across
  directories it is a change in each (either may persist without the other).

The durable image lives in BACKING: `files/INO` holds a file inode's durable bytes, `dirs/INO.json` a directory
inode's durable entries (name -> [inode, "f" or "d"]); inode 1 is the root. The mounted view is kept in memory:
the durable image plus the changes made since each node's last fsync (`pending`). On start the image is loaded
and what no durable entry reaches is deleted (an orphan after a real power loss).

Commands, one line each on standard input, one JSON line of answer on standard output:
- `arm N`: freeze before the N-th next change (see `PowerLossFS.arm`), the crash point of the next power loss
  (`arm 0` disarms);
- `stats`: what is pending now (files and bytes not fsynced, directory changes not fsynced);
- `crash drop`: a power loss; every pending change is lost; the process answers and exits at once (the mount is
  then dead: the caller unmounts it and mounts BACKING again);
- `crash torn SEED`: a power loss where the disk had already written part of what was pending, as real disks
  may: for each file a random prefix of its pending writes (the last one kept may be cut inside, or have only
  its size persisted, reading as zeros) and for each directory a random prefix of its pending changes persist,
  chosen by random.Random(SEED).
End of input unmounts (nothing pending is kept). Only the kernel's own requests reach the file system, served on
one thread (libfuse's `-s`); the command thread takes the same lock, so a crash falls between two requests.
"""

from __future__ import annotations

import errno
import json
import os
import random
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT_INO = 1


@dataclass(eq=False)
class File:
    ino: int
    data: bytearray = field(default_factory=bytearray)
    # Changes since the last fsync, in order: ("w", offset, bytes) or ("t", size).
    pending: list[tuple] = field(default_factory=list)
    mode: int = 0o644
    mtime_ns: int = field(default_factory=time.time_ns)
    kind = "f"


@dataclass(eq=False)
class Dir:
    ino: int
    entries: dict[str, File | Dir] = field(default_factory=dict)
    # Changes since the last fsync of this directory, in order; each is applied whole: [(name, node or None)].
    pending: list[list[tuple[str, File | Dir | None]]] = field(default_factory=list)
    durable: dict[str, tuple[int, str]] = field(default_factory=dict)
    mode: int = 0o755
    mtime_ns: int = field(default_factory=time.time_ns)
    kind = "d"


Node = File | Dir


def _err(code: int) -> OSError:
    return OSError(code, os.strerror(code))


class DurableStore:
    """The durable image in a real directory (never lost: only the FUSE process's memory is)."""

    def __init__(self, root: Path) -> None:
        self.files = root / "files"
        self.dirs = root / "dirs"
        self.files.mkdir(parents=True, exist_ok=True)
        self.dirs.mkdir(parents=True, exist_ok=True)

    def apply_file(self, ino: int, ops: list[tuple], cut: int | None = None, zeros: bool = False) -> None:
        """Apply `ops` to the durable bytes of file `ino`; with `cut`, only that many bytes of the last write;
        with `zeros`, the last write's range but not its data (the size reached the disk before the data)."""
        fd = os.open(self.files / str(ino), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            for i, op in enumerate(ops):
                if op[0] == "t":
                    os.ftruncate(fd, op[1])
                    continue
                data = op[2]
                if i + 1 == len(ops):
                    data = bytes(len(data)) if zeros else data[:cut] if cut is not None else data
                os.pwrite(fd, data, op[1])
        finally:
            os.close(fd)

    def write_dir(self, ino: int, entries: dict[str, tuple[int, str]]) -> None:
        path = self.dirs / f"{ino}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries, sort_keys=True))
        os.replace(tmp, path)

    def _read_dir(self, ino: int) -> dict[str, tuple[int, str]]:
        try:
            return {name: (int(v[0]), str(v[1])) for name, v in
                    json.loads((self.dirs / f"{ino}.json").read_text()).items()}
        except FileNotFoundError:
            return {}

    def load(self) -> tuple[Dir, int]:
        """The durable tree from the root and the next free inode number; deletes what the tree does not reach."""
        files: dict[int, File] = {}
        seen_dirs: set[int] = set()

        def build(ino: int) -> Dir:
            seen_dirs.add(ino)
            node = Dir(ino)
            for name, (child, kind) in sorted(self._read_dir(ino).items()):
                if kind == "d":
                    if child in seen_dirs:  # a directory reached twice (a torn cross-directory rename): once only
                        continue
                    node.entries[name] = build(child)
                else:
                    if child not in files:
                        try:
                            data = bytearray((self.files / str(child)).read_bytes())
                        except FileNotFoundError:
                            data = bytearray()  # named durably, but its data never fsynced
                        files[child] = File(child, data)
                    node.entries[name] = files[child]
            node.durable = {name: (c.ino, c.kind) for name, c in node.entries.items()}
            return node

        root = build(ROOT_INO)
        highest = ROOT_INO
        for path in self.files.iterdir():
            ino = int(path.name)
            highest = max(highest, ino)
            if ino not in files:
                path.unlink()
        for path in self.dirs.iterdir():
            if path.suffix != ".json":
                path.unlink()
                continue
            ino = int(path.stem)
            highest = max(highest, ino)
            if ino not in seen_dirs:
                path.unlink()
        highest = max([highest, *files, *seen_dirs])
        return root, highest + 1


class PowerLossFS:
    """mfusepy Operations over the in-memory view (a plain class: mfusepy looks the methods up by name)."""

    use_ns = True

    def __init__(self, store: DurableStore) -> None:
        self.store = store
        self.root, self._next_ino = store.load()
        self.mutex = threading.Lock()
        self._handles: dict[int, Node] = {}
        self._next_fh = 1
        self._dirty: dict[int, Node] = {}  # nodes with pending changes, unlinked ones included
        self.counts = {"ops": 0, "fsyncs": 0, "dir_fsyncs": 0, "writes": 0}
        self._armed: int | None = None  # changes left before the file system freezes (see `arm`)
        self.frozen = False

    def arm(self, changes: int) -> None:
        """Freeze before the `changes`-th next change (a write, truncate, create, mkdir, unlink, rmdir, rename,
        fsync or directory fsync): that request and every later one wait forever, so the power loss that follows
        falls exactly there, whatever the writer was in the middle of. 0 disarms."""
        self._armed = changes if changes > 0 else None

    def _change(self) -> None:
        """Count a change about to be made (the mutex is held); freeze here once armed down to it."""
        self.counts["ops"] += 1
        if self._armed is None:
            return
        self._armed -= 1
        if self._armed > 0:
            return
        self._armed = None
        self.frozen = True
        self.mutex.release()  # the command thread takes it to crash; this request is never answered
        threading.Event().wait()

    # --- paths and handles -------------------------------------------------------------------------------------
    def _lookup(self, path: str) -> Node:
        node: Node = self.root
        for part in path.split("/"):
            if not part:
                continue
            if not isinstance(node, Dir):
                raise _err(errno.ENOTDIR)
            child = node.entries.get(part)
            if child is None:
                raise _err(errno.ENOENT)
            node = child
        return node

    def _parent(self, path: str) -> tuple[Dir, str]:
        head, _, name = path.rstrip("/").rpartition("/")
        parent = self._lookup(head)
        if not isinstance(parent, Dir):
            raise _err(errno.ENOTDIR)
        return parent, name

    def _node(self, path: str | None, fh: int | None) -> Node:
        if fh is not None and fh in self._handles:
            return self._handles[fh]
        if path is None:
            raise _err(errno.EBADF)
        return self._lookup(path)

    def _handle(self, node: Node) -> int:
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = node
        return fh

    def _new_ino(self) -> int:
        ino = self._next_ino
        self._next_ino += 1
        return ino

    def _change_dir(self, parent: Dir, changes: list[tuple[str, Node | None]]) -> None:
        for name, node in changes:
            if node is None:
                parent.entries.pop(name, None)
            else:
                parent.entries[name] = node
        parent.pending.append(changes)
        parent.mtime_ns = time.time_ns()
        self._dirty[parent.ino] = parent

    def _change_file(self, node: File, op: tuple) -> None:
        last = node.pending[-1] if node.pending else None
        if op[0] == "w" and last is not None and last[0] == "w" and last[1] + len(last[2]) == op[1]:
            last[2].extend(op[2])  # an append to the previous write: one op (a torn cut can still fall inside)
        else:
            node.pending.append(op if op[0] == "t" else ("w", op[1], bytearray(op[2])))
        node.mtime_ns = time.time_ns()
        self._dirty[node.ino] = node

    # --- attributes --------------------------------------------------------------------------------------------
    def getattr(self, path: str | None, fh: int | None = None) -> dict:
        with self.mutex:
            node = self._node(path, fh)
            if isinstance(node, Dir):
                subdirs = sum(1 for c in node.entries.values() if isinstance(c, Dir))
                mode, nlink, size = stat.S_IFDIR | node.mode, 2 + subdirs, 4096
            else:
                mode, nlink, size = stat.S_IFREG | node.mode, 1, len(node.data)
            return {"st_mode": mode, "st_nlink": nlink, "st_size": size, "st_uid": os.getuid(),
                    "st_gid": os.getgid(), "st_atime": node.mtime_ns, "st_mtime": node.mtime_ns,
                    "st_ctime": node.mtime_ns, "st_blocks": (size + 511) // 512, "st_ino": node.ino}

    def access(self, path: str, amode: int) -> int:
        with self.mutex:
            self._lookup(path)
        return 0

    def chmod(self, path: str | None, mode: int) -> int:
        with self.mutex:
            self._lookup(path or "/").mode = mode & 0o7777
        return 0

    def chown(self, path: str | None, uid: int, gid: int) -> int:
        return 0

    def utimens(self, path: str | None, times: tuple[int, int] | None = None) -> int:
        with self.mutex:
            if path is not None:
                node = self._lookup(path)
                node.mtime_ns = times[1] if times else time.time_ns()
        return 0

    def statfs(self, path: str) -> dict:
        blocks = 1 << 26  # 256 GiB of 4 KiB blocks, half free: the broker's disk checks see room
        return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": blocks, "f_bfree": blocks // 2,
                "f_bavail": blocks // 2, "f_files": 1 << 20, "f_ffree": 1 << 19, "f_favail": 1 << 19,
                "f_namemax": 255}

    # --- directories -------------------------------------------------------------------------------------------
    def mkdir(self, path: str, mode: int) -> int:
        with self.mutex:
            self._change()
            parent, name = self._parent(path)
            if name in parent.entries:
                raise _err(errno.EEXIST)
            self._change_dir(parent, [(name, Dir(self._new_ino(), mode=mode & 0o7777))])
        return 0

    def rmdir(self, path: str) -> int:
        with self.mutex:
            self._change()
            parent, name = self._parent(path)
            node = parent.entries.get(name)
            if node is None:
                raise _err(errno.ENOENT)
            if not isinstance(node, Dir):
                raise _err(errno.ENOTDIR)
            if node.entries:
                raise _err(errno.ENOTEMPTY)
            self._change_dir(parent, [(name, None)])
        return 0

    def unlink(self, path: str) -> int:
        with self.mutex:
            self._change()
            parent, name = self._parent(path)
            node = parent.entries.get(name)
            if node is None:
                raise _err(errno.ENOENT)
            if isinstance(node, Dir):
                raise _err(errno.EISDIR)
            self._change_dir(parent, [(name, None)])
        return 0

    def rename(self, old: str, new: str) -> int:
        with self.mutex:
            self._change()
            src, old_name = self._parent(old)
            dst, new_name = self._parent(new)
            node = src.entries.get(old_name)
            if node is None:
                raise _err(errno.ENOENT)
            target = dst.entries.get(new_name)
            if target is node:
                return 0
            if target is not None:
                if isinstance(node, Dir) and not isinstance(target, Dir):
                    raise _err(errno.ENOTDIR)
                if isinstance(target, Dir) and not isinstance(node, Dir):
                    raise _err(errno.EISDIR)
                if isinstance(target, Dir) and target.entries:
                    raise _err(errno.ENOTEMPTY)
            if src is dst:
                self._change_dir(src, [(old_name, None), (new_name, node)])  # atomic within one directory
            else:
                self._change_dir(src, [(old_name, None)])
                self._change_dir(dst, [(new_name, node)])
        return 0

    def opendir(self, path: str) -> int:
        with self.mutex:
            node = self._lookup(path)
            if not isinstance(node, Dir):
                raise _err(errno.ENOTDIR)
            return self._handle(node)

    def readdir(self, path: str | None, fh: int) -> list[str]:
        with self.mutex:
            node = self._node(path, fh)
            if not isinstance(node, Dir):
                raise _err(errno.ENOTDIR)
            return [".", "..", *node.entries]

    def releasedir(self, path: str | None, fh: int) -> int:
        with self.mutex:
            self._handles.pop(fh, None)
        return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        with self.mutex:
            self._change()
            node = self._node(path, fh)
            if isinstance(node, Dir):
                self._persist_dir(node)
                self.counts["dir_fsyncs"] += 1
        return 0

    def _persist_dir(self, node: Dir) -> None:
        if not node.pending:
            return
        node.durable = {name: (child.ino, child.kind) for name, child in node.entries.items()}
        self.store.write_dir(node.ino, node.durable)
        node.pending.clear()
        self._dirty.pop(node.ino, None)

    # --- files -------------------------------------------------------------------------------------------------
    def create(self, path: str, mode: int, flags: int = 0) -> int:
        with self.mutex:
            self._change()
            parent, name = self._parent(path)
            node = parent.entries.get(name)
            if node is None:
                node = File(self._new_ino(), mode=mode & 0o7777)
                self._change_dir(parent, [(name, node)])
            elif isinstance(node, Dir):
                raise _err(errno.EISDIR)
            elif flags & os.O_TRUNC and node.data:
                self._truncate(node, 0)
            return self._handle(node)

    def open(self, path: str, flags: int) -> int:
        with self.mutex:
            node = self._lookup(path)
            if isinstance(node, Dir):
                raise _err(errno.EISDIR)
            if flags & os.O_TRUNC and node.data:
                self._truncate(node, 0)
            return self._handle(node)

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        with self.mutex:
            node = self._node(path, fh)
            if not isinstance(node, File):
                raise _err(errno.EISDIR)
            return bytes(node.data[offset:offset + size])

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        with self.mutex:
            self._change()
            node = self._node(path, fh)
            if not isinstance(node, File):
                raise _err(errno.EISDIR)
            end = offset + len(data)
            if end > len(node.data):
                node.data.extend(bytes(end - len(node.data)))
            node.data[offset:end] = data
            self._change_file(node, ("w", offset, data))
            self.counts["writes"] += 1
            return len(data)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        with self.mutex:
            self._change()
            node = self._node(path, fh)
            if not isinstance(node, File):
                raise _err(errno.EISDIR)
            self._truncate(node, length)
        return 0

    def _truncate(self, node: File, length: int) -> None:
        if length < len(node.data):
            del node.data[length:]
        else:
            node.data.extend(bytes(length - len(node.data)))
        self._change_file(node, ("t", length))

    def flush(self, path: str | None, fh: int) -> int:
        return 0  # close() makes nothing durable

    def release(self, path: str | None, fh: int) -> int:
        with self.mutex:
            self._handles.pop(fh, None)
        return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        with self.mutex:
            self._change()
            node = self._node(path, fh)
            if isinstance(node, File):
                if node.pending:
                    self.store.apply_file(node.ino, node.pending)
                    node.pending.clear()
                    self._dirty.pop(node.ino, None)
            else:
                self._persist_dir(node)
            self.counts["fsyncs"] += 1
        return 0

    def link(self, target: str, source: str) -> int:
        raise _err(errno.EPERM)

    def symlink(self, target: str, source: str) -> int:
        raise _err(errno.EPERM)

    def mknod(self, path: str, mode: int, dev: int) -> int:
        raise _err(errno.EPERM)

    # --- power loss --------------------------------------------------------------------------------------------
    def pending_stats(self) -> dict:
        files = [n for n in self._dirty.values() if isinstance(n, File)]
        dirs = [n for n in self._dirty.values() if isinstance(n, Dir)]
        return {"frozen": self.frozen, "files": len(files),
                "bytes": sum(len(op[2]) for n in files for op in n.pending if op[0] == "w"),
                "truncates": sum(1 for n in files for op in n.pending if op[0] == "t"),
                "dirs": len(dirs), "dir_changes": sum(len(n.pending) for n in dirs), **self.counts}

    def crash(self, mode: str, seed: int) -> dict:
        """What a power loss now loses (and, torn, keeps). Call with the lock held; the process must then exit."""
        stats = {"mode": mode, **self.pending_stats(), "kept_bytes": 0, "zeroed_writes": 0, "kept_dir_changes": 0}
        if mode != "torn":
            return stats
        rng = random.Random(seed)
        for node in sorted(self._dirty.values(), key=lambda n: n.ino):
            if isinstance(node, File):
                keep = rng.randint(0, len(node.pending))
                if keep == 0:
                    continue
                ops = node.pending[:keep]
                cut, zeros, how = None, False, rng.random()
                if ops[-1][0] == "w" and how < 0.4:
                    cut = rng.randint(0, len(ops[-1][2]))  # the disk stopped inside this write
                elif ops[-1][0] == "w" and how < 0.6:
                    zeros = True  # the file's new size reached the disk, its data did not
                    stats["zeroed_writes"] += 1
                self.store.apply_file(node.ino, ops, cut, zeros)
                stats["kept_bytes"] += sum(len(op[2]) for op in ops[:-1] if op[0] == "w")
                if ops[-1][0] == "w" and not zeros:
                    stats["kept_bytes"] += len(ops[-1][2]) if cut is None else cut
            else:
                keep = rng.randint(0, len(node.pending))
                if keep == 0:
                    continue
                entries = dict(node.durable)
                for changes in node.pending[:keep]:
                    for name, child in changes:
                        if child is None:
                            entries.pop(name, None)
                        else:
                            entries[name] = (child.ino, child.kind)
                self.store.write_dir(node.ino, entries)
                stats["kept_dir_changes"] += keep
        return stats


def _commands(fs: PowerLossFS, mountpoint: str) -> None:
    """The command loop on standard input (see the module docstring)."""
    out = sys.stdout
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "arm":
            with fs.mutex:
                fs.arm(int(words[1]))
            out.write(json.dumps({"armed": int(words[1])}) + "\n")
            out.flush()
        elif words[0] == "stats":
            with fs.mutex:
                answer = fs.pending_stats()
            out.write(json.dumps(answer) + "\n")
            out.flush()
        elif words[0] == "crash":
            mode = words[1] if len(words) > 1 else "drop"
            seed = int(words[2]) if len(words) > 2 else 0
            fs.mutex.acquire()  # held until the process is gone: no request is served after the crash point
            answer = fs.crash(mode, seed)
            out.write(json.dumps(answer) + "\n")
            out.flush()
            os._exit(0)
        else:
            out.write(json.dumps({"error": f"unknown command {words[0]!r}"}) + "\n")
            out.flush()
    # The driving process is gone: unmount and exit (what was pending is simply not kept).
    subprocess.run(["fusermount3", "-u", "-z", mountpoint], check=False)
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    import mfusepy

    class _Fuse(mfusepy.FUSE):
        # mfusepy's libfuse-3 truncate drops the file handle; ftruncate of an open file needs it.
        def truncate_fuse_3(self, path, length, fip):
            fh = fip.contents.fh if fip else None
            return self.operations.truncate(None if path is None else path.decode(self.encoding, self.errors),
                                            length, fh)

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.exit("usage: python -m tests.helpers.powerloss_fs BACKING MOUNTPOINT")
    backing, mountpoint = args
    fs = PowerLossFS(DurableStore(Path(backing)))
    threading.Thread(target=_commands, args=(fs, mountpoint), name="commands", daemon=True).start()
    # One request at a time (-s); hard_remove: an unlinked open file is not renamed to .fuse_hidden* (that
    # rename would be a directory change of ours); attributes and entries may be cached by the kernel, since
    # every change goes through it.
    _Fuse(fs, mountpoint, foreground=True, nothreads=True, hard_remove=True, fsname="powerloss",
          default_permissions=True)


if __name__ == "__main__":
    main()
