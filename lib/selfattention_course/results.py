"""Results only the harvest can write: the runner's side of the exchange
with each harvest (see :mod:`selfattention_course.runner`): a new file in a
folder held open, named after a nonce, accepted only with the digest the
harvest reported."""


import os


def _write_new(dir_fd: int, name: str, data: bytes) -> None:
    """Write a new regular file ``name`` of the folder ``dir_fd``."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                 | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def result_name(nonce: str) -> str:
    """The file a harvest writes its result to."""
    return f"result-{nonce}.bin"


def result_digest(nonce: str, data: bytes) -> str:
    """What a harvest reports for the result ``data`` it wrote."""
    import hashlib

    return hashlib.sha256(nonce.encode() + b"\0" + data).hexdigest()


def _reported_result(dir_fd: int, nonce: str, cases_name: str,
                     values: list) -> tuple[bytes | None, str]:
    """The result the harvest reported, or ``(None, why not)``.

    The folder must hold the cases and the result only; the result must be
    a regular file within the size limit, and the call's one result value
    must be its digest.
    """
    from .wire import MAX_BUNDLE

    expected = result_name(nonce)
    try:
        entries = sorted(os.listdir(dir_fd))
    except OSError:
        return None, "forged"
    if entries != sorted({cases_name, expected}):
        return None, "forged"
    if _oversized(dir_fd, expected, MAX_BUNDLE):
        return None, "too-large"
    data = _read_result_at(dir_fd, expected, MAX_BUNDLE)
    if data is None:
        return None, "forged"
    if values != [repr(result_digest(nonce, data))]:
        return None, "forged"
    return data, "ok"


def _oversized(dir_fd: int, name: str, cap: int) -> bool:
    """Whether the harvest's result is a regular file over the cap: an
    answer's output too large to send, not a forgery."""
    import stat

    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size > cap


def _littered(dir_fd: int, cases_name: str) -> bool:
    """Whether a harvest that failed left anything but the cases (it
    writes nothing before its result: something else did)."""
    try:
        return sorted(os.listdir(dir_fd)) != [cases_name]
    except OSError:
        return True


def _read_result_at(dir_fd: int, name: str, cap: int) -> bytes | None:
    """A harvest file of the folder ``dir_fd``, if it is a regular file
    within the cap (never through a link)."""
    import stat

    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > cap:
            return None
        data = os.read(fd, cap + 1)
        return data if len(data) <= cap else None
    except OSError:
        return None
    finally:
        os.close(fd)
