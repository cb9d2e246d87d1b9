"""Writing a directory so that readers see the previous version or the new one, never a mix.

A save is written into a staging sibling `.NAME.<kind>-<pid>-<random>.<host>` and swapped
in: in one step on Linux, else by two renames (the previous directory goes to
`.NAME.old-<pid>-<random>.<host>` first). A process killed part-way leaves such siblings
behind; the pid and machine in their name tell a later save (or `load_pretrained`) on the
same machine which ones belong to dead processes, so it can put a retired previous save
back and delete the rest without touching a concurrent saver that is still running.
"""

import ctypes
import errno
import hashlib
import os
import re
import shutil
import socket
import stat
import sys
import uuid

RETIRED = "old"
# Owner pids of leftovers are only checked where `os.kill(pid, 0)` is a harmless probe.
CAN_PROBE_PIDS = os.name == "posix"
# Swapping two directories in one step needs Linux's `renameat2`.
CAN_EXCHANGE = sys.platform.startswith("linux")


def host_tag(hostname=None):
    """8 hex digits naming a machine: a pid means something only on the machine it ran on.

    Args:
        hostname: str. Defaults to `None`, meaning this machine's name.
    """
    hostname = socket.gethostname() if hostname is None else hostname
    return hashlib.sha256(hostname.encode("utf-8")).hexdigest()[:8]


def leftover_name(name, kind, pid, token, host=None):
    """The name of a staging (`kind` `"saving"`, `"exporting"`) or retired (`"old"`) sibling.

    Args:
        name: str, the saved directory's name.
        kind: str of lowercase letters.
        pid: int, the owner process.
        token: str of hex digits, unique among the owner's siblings.
        host: str, `host_tag()` of the owner's machine. Defaults to `None`, meaning this
            machine's.

    Returns:
        str, `.NAME.KIND-PID-TOKEN.HOST`.
    """
    return f".{name}.{kind}-{pid}-{token}.{host_tag() if host is None else host}"


def _sibling(directory, kind):
    name = leftover_name(directory.name, kind, os.getpid(), uuid.uuid4().hex[:12])
    return directory.parent / name


def _leftover_pattern(directory):
    name = re.escape(directory.name)
    return re.compile(rf"\.{name}\.([a-z]+)-(\d+)-[0-9a-f]+\.([0-9a-f]{{8}})")


def _is_alive(pid):
    if pid == os.getpid() or not CAN_PROBE_PIDS:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. PermissionError: the process exists but is another user's.
        return True
    return True


def dead_leftovers(directory):
    """The staging and retired siblings of `directory` whose owner process has ended.

    Args:
        directory: `pathlib.Path`, the saved directory.

    Returns:
        A list of `(kind, path)`, `kind` being `"old"` for a retired previous save.
    """
    pattern = _leftover_pattern(directory)
    try:
        names = os.listdir(directory.parent)
    except OSError:
        return []
    here = host_tag()
    found = []
    for name in sorted(names):
        match = pattern.fullmatch(name)
        # Another machine's saver (on a shared file system) is never judged from here.
        if match and match.group(3) == here and not _is_alive(int(match.group(2))):
            found.append((match.group(1), directory.parent / name))
    return found


def recover_directory(directory):
    """Undoes what killed saves of `directory` left: best effort, never raises.

    If `directory` is missing and a dead process had retired it (it was killed between
    the two renames of `replace_directory`), the retired directory is renamed back.
    Every other leftover of a dead process is deleted.

    Args:
        directory: `pathlib.Path`, the saved directory.

    Returns:
        `True` if a retired directory was put back at `directory`.
    """
    leftovers = dead_leftovers(directory)
    restored = None
    retired = [path for kind, path in leftovers if kind == RETIRED]
    if retired and not os.path.lexists(directory):
        try:
            # Only one save retires a directory at a time; the newest is the last good one.
            restored = max(retired, key=lambda path: path.stat().st_ctime)
            os.rename(restored, directory)
        except OSError:
            restored = None
    for _, path in leftovers:
        if path != restored:
            shutil.rmtree(path, ignore_errors=True)
    return restored is not None


def make_staging(directory, kind):
    """Creates the empty staging sibling of `directory`, after cleaning dead leftovers.

    `os.mkdir` applies the process umask (`tempfile.mkdtemp` would force mode 0700), so
    the directory's mode is the one a plain `mkdir` gives: `follow_umask` copies it.

    Args:
        directory: `pathlib.Path`, the directory to be written.
        kind: str of lowercase letters naming the writer (`"saving"`, `"exporting"`).

    Returns:
        The staging directory, a `pathlib.Path`.
    """
    directory.parent.mkdir(parents=True, exist_ok=True)
    recover_directory(directory)
    staging = _sibling(directory, kind)
    os.mkdir(staging)
    return staging


def follow_umask(staging):
    """Gives everything under `staging` the mode `mkdir` and `open` give under the umask.

    Libraries writing into it choose their own modes (TensorFlow makes `variables/` 0755
    whatever the umask); a saved model is shared as the user's other files are. The
    umask is read off `staging` itself, made by `os.mkdir`, rather than by `os.umask`,
    which would change it for every thread while it is read.

    Args:
        staging: `pathlib.Path` made by `make_staging`.
    """
    directory_mode = staging.stat().st_mode & 0o777
    file_mode = directory_mode & 0o666

    def set_permissions(path, mode):
        # Only the permission bits: a set-group-id bit inherited from the parent stays.
        current = os.lstat(path).st_mode
        if not stat.S_ISLNK(current) and current & 0o777 != mode:
            os.chmod(path, (current & ~0o777) | mode)

    for root, directories, files in os.walk(staging):
        for name in directories:
            set_permissions(os.path.join(root, name), directory_mode)
        for name in files:
            set_permissions(os.path.join(root, name), file_mode)


def _exchange(first, second):
    """Swaps two paths in one step (Linux `renameat2` with `RENAME_EXCHANGE`).

    Returns:
        `True` if swapped; `False` where the system or file system cannot, so the caller
        falls back to two renames.
    """
    if not CAN_EXCHANGE:
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # Not glibc >= 2.28, or not Linux.
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes += [ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    at_cwd, rename_exchange = -100, 2
    if renameat2(at_cwd, os.fsencode(first), at_cwd, os.fsencode(second), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def replace_directory(staging, directory):
    """Moves `staging` to `directory`; the old directory survives any failure.

    On Linux the two are swapped in one step, so `directory` is never missing; a
    process killed before it deletes the old directory (now at the staging name)
    leaves it to a later clean-up. Elsewhere the old directory is renamed to a
    retired sibling first: a process killed between the two renames leaves no
    `directory`, and `recover_directory` puts the retired one back.

    Args:
        staging: `pathlib.Path`, the complete new directory.
        directory: `pathlib.Path`, where it goes.
    """
    if not os.path.lexists(directory):
        os.rename(staging, directory)
        return
    if _exchange(staging, directory):
        shutil.rmtree(staging, ignore_errors=True)
        return
    retired = _sibling(directory, RETIRED)
    os.rename(directory, retired)
    try:
        os.rename(staging, directory)
    except BaseException:
        os.rename(retired, directory)
        raise
    shutil.rmtree(retired, ignore_errors=True)


def write_directory(directory, kind, write):
    """Calls `write(staging)` and swaps the result in at `directory`.

    Args:
        directory: `pathlib.Path`.
        kind: str, the writer's name in the staging directory's name.
        write: function of the staging `pathlib.Path` that fills it.

    Returns:
        `directory`.
    """
    staging = make_staging(directory, kind)
    try:
        write(staging)
        follow_umask(staging)
        replace_directory(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return directory
