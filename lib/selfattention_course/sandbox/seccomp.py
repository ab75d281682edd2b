"""The seccomp filter of a bubblewrap job: no key management calls, no new
user namespaces (see :mod:`selfattention_course.sandbox`)."""

from __future__ import annotations

import os

# The key management calls (add_key, request_key, keyctl) by machine, native
# and 32-bit compatible: keyrings are the one kernel object that namespaces
# do not separate, and a user id drawn for a job may be a real user's.
_KEY_CALLS = {
    "x86_64": ((0xC000003E, (248, 249, 250)), (0x40000003, (286, 287, 288))),
    "aarch64": ((0xC00000B7, (217, 218, 219)), (0x40000028, (309, 310, 311))),
}


# The calls that make a user namespace, by the same machines and in the
# same order: (clone, unshare) whose flags say CLONE_NEWUSER are refused;
# clone3 passes its flags in memory that a filter cannot read, so it
# answers ENOSYS (the C library then uses clone); setns is refused.
_USERNS_CALLS = {
    "x86_64": ({"clone": 56, "unshare": 272, "clone3": 435, "setns": 308},
               {"clone": 120, "unshare": 310, "clone3": 435, "setns": 346}),
    "aarch64": ({"clone": 220, "unshare": 97, "clone3": 435, "setns": 268},
                {"clone": 120, "unshare": 337, "clone3": 435, "setns": 375}),
}


CLONE_NEWUSER = 0x10000000


_ENOSYS = 38


def seccomp_program(machine: str | None = None) -> bytes | None:
    """A classic BPF seccomp program that refuses the key management calls
    and new user namespaces with EPERM (``clone3`` with ENOSYS) and allows
    everything else; None for an unknown machine."""
    import struct

    machine = machine or os.uname().machine
    if machine not in _KEY_CALLS:
        return None
    allow, deny = 0x7FFF0000, 0x00050000 | 1       # RET_ALLOW, ERRNO(EPERM)
    nosys = 0x00050000 | _ENOSYS
    code: list[tuple] = []                          # (op, k, jt, jf) labels

    def load(offset):
        code.append((0x20, offset, None, None))     # ld [offset]

    def jump(op, k, true, false):
        code.append((op, k, true, false))

    for (arch, calls), userns in zip(_KEY_CALLS[machine],
                                     _USERNS_CALLS[machine]):
        mine = f"next{arch}"
        flags = f"flags{arch}"
        load(4)                                      # seccomp_data.arch
        jump(0x15, arch, None, mine)                 # jeq
        load(0)                                      # seccomp_data.nr
        if machine == "x86_64" and arch == 0xC000003E:
            jump(0x35, _X32, "deny", None)           # jge
        for number in calls:
            jump(0x15, number, "deny", None)
        jump(0x15, userns["setns"], "deny", None)
        jump(0x15, userns["clone3"], "nosys", None)
        jump(0x15, userns["clone"], flags, None)
        jump(0x15, userns["unshare"], flags, None)
        code.append(("ret", allow, None, None))
        code.append(("label", flags, None, None))
        load(16)                    # the low word of the first argument
        jump(0x45, CLONE_NEWUSER, "deny", None)      # jset
        code.append(("ret", allow, None, None))
        code.append(("label", mine, None, None))
    code.append(("ret", allow, None, None))
    code.append(("label", "deny", None, None))
    code.append(("ret", deny, None, None))
    code.append(("label", "nosys", None, None))
    code.append(("ret", nosys, None, None))
    places, index = {}, 0
    for op, k, _, _ in code:
        if op == "label":
            places[k] = index
        else:
            index += 1
    out, index = [], 0
    for op, k, true, false in code:
        if op == "label":
            continue
        if op == "ret":
            out.append(struct.pack("<HBBI", 0x06, 0, 0, k))
        else:
            skip = [0 if t is None else places[t] - index - 1
                    for t in (true, false)]
            out.append(struct.pack("<HBBI", op, skip[0], skip[1], k))
        index += 1
    return b"".join(out)


_X32 = 0x40000000                    # x86_64's x32 calls: refused as a whole
