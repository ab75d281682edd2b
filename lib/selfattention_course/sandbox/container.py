"""The container backend: docker or podman, with the image built from this
package's ``Dockerfile``."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..names import JOB_MOUNT, SCRATCH
from .backend import Backend, Limits, _sandbox_env


@dataclass
class Container(Backend):
    """Jobs in a docker or podman container (see the module docstring)."""

    name: str = "docker"
    engine: str = "docker"
    image: str = "selfattention-grader"

    def job_group(self, token: str, limits: Limits) -> None:
        return None                   # the engine keeps the container's own

    def named(self, cmd: list[str], token: str) -> list[str]:
        return cmd[:2] + ["--name", token] + cmd[2:]

    def command(self, job: Path, slot: int, limits: Limits,
                filter_fd: int | None = None) -> list[str]:
        memory = str(limits.memory_bytes)
        cmd = [self.engine, "run", "--rm", "--interactive",
               "--network", "none",
               "--read-only", "--cap-drop", "ALL",
               "--security-opt", "no-new-privileges",
               "--user", "65534:65534",
               "--pids-limit", str(limits.processes),
               "--memory", memory, "--memory-swap", memory,
               "--ulimit", f"fsize={limits.file_bytes}:{limits.file_bytes}",
               "--ulimit", "core=0:0",
               "--tmpfs", f"{SCRATCH}:rw,size={limits.tmp_bytes},mode=1777",
               "--mount", f"type=bind,source={job},target={JOB_MOUNT},"
                          f"readonly",
               "--workdir", SCRATCH]
        for key, value in _sandbox_env("/usr/local/bin/python").items():
            cmd += ["--env", f"{key}={value}"]
        return cmd + [self.image, "python", "-I", "-m",
                      "selfattention_course.runner", JOB_MOUNT]

    def kill(self, process: subprocess.Popen, token: str) -> None:
        super().kill(process, token)
        subprocess.run([self.engine, "kill", token], capture_output=True,
                       timeout=30, check=False)

    def works(self) -> bool:
        if not shutil.which(self.engine):
            return False
        try:
            done = subprocess.run([self.engine, "image", "inspect",
                                   self.image], capture_output=True,
                                  timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0

    def describe(self) -> str:
        return f"{self.engine} (image {self.image})"
