"""Install transformer-explained from an offline bundle (a folder `transformer-explained bundle` wrote),
with no network: every wheel comes from the bundle's wheels/ folder, pip's own configuration and
indexes are ignored.

    sh BUNDLE/install.sh                  # what a teacher runs; it calls this module
    python -m transformer_explained.install_bundle BUNDLE [--prefix DIR] [--bin DIR]

What it does, in an order that leaves nothing half-installed:
  1. reads BUNDLE/bundle.json and checks that this Python and this machine are the ones the bundle
     was made for, and that every file is there with its recorded checksum (any doubt: one line that
     says what is wrong, exit code 2, nothing written);
  2. makes a fresh virtual environment PREFIX/envs/VERSION-TIME and installs the wheels into it
     (pip --no-index); when anything fails, or on Ctrl-C, that environment is removed again;
  3. copies the bundle's own checkpoints (if any) into the user's checkpoint folder;
  4. switches PREFIX/current to the new environment in one step (a previous installation keeps
     working until then, and is removed after), and links the command into --bin.

This file runs under whatever `python3` a school machine has, before anything is installed: it uses
the standard library only, and model.places (also standard library only) read from the bundle's wheel.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path

FORMAT = "transformer-explained-bundle/1"
MANIFEST = "bundle.json"
COMMAND = "transformer-explained"
INCOMPLETE = ".incomplete"            # in an environment being installed; removed when it is done


class BundleError(Exception):
    """Bad input: the message is one line that says what is wrong and what to do."""


# ---------------------------------------------------------------- the machine and the bundle

def machine_platform() -> str:
    """This machine in the bundle's terms: linux-x86_64, linux-aarch64, macos-arm64, windows-amd64..."""
    system = {"linux": "linux", "darwin": "macos", "win32": "windows"}.get(sys.platform, sys.platform)
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine) if system == "linux" else machine
    machine = {"x86_64": "amd64"}.get(machine, machine) if system == "windows" else machine
    return f"{system}-{machine}"


def python_tag() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def glibc_version() -> tuple[int, int] | None:
    """The C library's version on Linux (None: not glibc, e.g. Alpine's musl)."""
    name, version = platform.libc_ver()
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match[1]), int(match[2])) if name == "glibc" and match else None


def read_manifest(bundle: Path) -> dict:
    path = bundle / MANIFEST
    if not bundle.is_dir():
        raise BundleError(f"{bundle} is not a folder: give the folder `{COMMAND} bundle` wrote")
    if not path.is_file():
        raise BundleError(f"{bundle} is not a bundle of {COMMAND} (it has no {MANIFEST}): give the folder "
                          f"`{COMMAND} bundle` wrote, copied whole")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BundleError(f"{path} cannot be read ({exc}): copy the bundle again") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{path} is not a bundle description this installer knows (expected {FORMAT}): "
                          f"use the install.sh inside that bundle")
    return manifest


def check_machine(manifest: dict) -> None:
    """This Python and this machine are the ones the bundle's wheels are for."""
    want_python, want_platform = manifest["python"], manifest["platform"]
    remake = f"make a bundle for this machine: `{COMMAND} bundle --python {python_tag()} " \
             f"--platform {machine_platform()}`"
    if sys.implementation.name != "cpython":
        raise BundleError(f"this bundle is for CPython {want_python}; this is {sys.implementation.name}: "
                          f"run install.sh with CPython {want_python} (PYTHON=/path/to/python3 sh install.sh)")
    if python_tag() != want_python:
        raise BundleError(f"this bundle is for Python {want_python}; {sys.executable} is Python {python_tag()}: "
                          f"run it with Python {want_python} (PYTHON=/path/to/python{want_python} sh install.sh), "
                          f"or {remake}")
    if machine_platform() != want_platform:
        raise BundleError(f"this bundle is for {want_platform}; this machine is {machine_platform()}: {remake}")
    need = manifest.get("glibc")
    if need and sys.platform == "linux":
        have = glibc_version()
        if have is None or have < tuple(need):
            found = "no glibc (musl?)" if have is None else f"glibc {have[0]}.{have[1]}"
            raise BundleError(f"this bundle's wheels need glibc {need[0]}.{need[1]} or newer; this machine has "
                              f"{found}: use a newer Linux distribution")


def check_files(bundle: Path, manifest: dict) -> None:
    """Every file the manifest lists is there, of its size and checksum (a copy cut short is caught)."""
    for name, entry in manifest["files"].items():
        path = bundle / name
        if not path.is_file():
            raise BundleError(f"the bundle is incomplete: {name} is missing: copy the whole folder again")
        if path.stat().st_size != entry["size"] or sha256(path) != entry["sha256"]:
            raise BundleError(f"the bundle is damaged: {name} is not the file it was made with: "
                              f"copy the whole folder again")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------- where things go

def default_prefix(bundle: Path, manifest: dict) -> Path:
    """The user's data folder of the project (model/storage/places.py, read from the bundle's own wheel)."""
    sys.path.insert(0, str(bundle / manifest["project_wheel"]))
    try:
        from model.storage.places import user_data_dir
    finally:
        sys.path.pop(0)
    return user_data_dir()


def default_bin() -> Path:
    return Path.home() / ".local" / "bin"


def bin_dir_of(env: Path) -> Path:
    return env / ("Scripts" if os.name == "nt" else "bin")


def python_of(env: Path) -> Path:
    return bin_dir_of(env) / ("python.exe" if os.name == "nt" else "python")


# ---------------------------------------------------------------- installing

def pip_environment() -> dict[str, str]:
    """The environment pip runs in: no configuration file, no PIP_* variables (a find-links or an index
    set there would make a bundle look complete that is not)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONNOUSERSITE="1")
    return env


def install_wheels(bundle: Path, manifest: dict, env: Path) -> None:
    wheels = bundle / "wheels"
    pip = wheels / manifest["pip_wheel"] / "pip"          # pip runs from its wheel: no ensurepip needed
    # --no-compile: pip would compile every module of every wheel (torch's thousands) to bytecode, 20 of the
    # 35 s an install takes here; Python compiles the modules the app imports on its first start instead
    # (BENCHMARKS.md, the offline bundle)
    command = [str(python_of(env)), "-I", str(pip), "install", "--no-index", "--find-links", str(wheels),
               "--no-cache-dir", "--no-compile", "--quiet", "--no-warn-script-location", *manifest["requirements"]]
    done = subprocess.run(command, env=pip_environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    if done.returncode != 0:
        last = [line for line in done.stdout.splitlines() if line.strip()][-1:] or ["(no output)"]
        raise RuntimeError(f"pip could not install from the bundle: {last[0].strip()}")


def smoke_test(env: Path) -> str:
    """The installed command answers (its version), or RuntimeError. (Every Python started here runs
    isolated, -I: a folder called model/ where the installer was started must not be imported instead.)"""
    done = subprocess.run([str(python_of(env)), "-I", "-m", "transformer_explained", "--version"],
                          env=pip_environment(), capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"the installed command does not start: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return done.stdout.strip()


def user_checkpoint_dir(env: Path) -> Path:
    done = subprocess.run([str(python_of(env)), "-I", "-c", "from model.places import user_dir; print(user_dir())"],
                          capture_output=True, text=True, check=True)
    return Path(done.stdout.strip())


def copy_checkpoints(bundle: Path, manifest: dict, env: Path) -> list[str]:
    """The bundle's own checkpoints into the user's folder (one already there by that name is kept)."""
    said: list[str] = []
    if not manifest.get("checkpoints"):
        return said
    target = user_checkpoint_dir(env)
    target.mkdir(parents=True, exist_ok=True)
    for name in manifest["checkpoints"]:
        if (target / name).exists():
            said.append(f"kept your checkpoint {target / name} (the bundle's {name} was not copied over it)")
            continue
        partial = target / f".{name}.copying"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(bundle / "checkpoints" / name, partial)
        os.replace(partial, target / name)
        said.append(f"checkpoint {name} -> {target / name}")
    return said


def switch_current(prefix: Path, env: Path) -> None:
    """PREFIX/current points at env, replaced in one rename (POSIX); older environments are removed."""
    current = prefix / "current"
    link = prefix / ".current.new"
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(Path("envs") / env.name, link, target_is_directory=True)
    os.replace(link, current)
    for old in (prefix / "envs").iterdir():
        if old != env:
            shutil.rmtree(old, ignore_errors=True)


def check_link(bin_dir: Path) -> None:
    """The command can be linked there (checked before anything is installed)."""
    link = bin_dir / COMMAND
    if link.exists() and not link.is_symlink():
        raise BundleError(f"{link} exists and is not a link: move it away, or give --bin DIR (or --no-link)")


def link_command(prefix: Path, bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    link, new = bin_dir / COMMAND, bin_dir / f".{COMMAND}.new"
    if new.is_symlink() or new.exists():
        new.unlink()
    os.symlink(bin_dir_of(prefix / "current") / COMMAND, new)
    os.replace(new, link)
    return link


def remove_unfinished(prefix: Path) -> None:
    """Environments an earlier install left unfinished (killed without a chance to clean up)."""
    envs = prefix / "envs"
    for env in envs.iterdir() if envs.is_dir() else []:
        if (env / INCOMPLETE).exists():
            shutil.rmtree(env, ignore_errors=True)


def install(bundle: Path, prefix: Path | None, bin_dir: Path | None, log=print) -> Path:
    """Checks everything, then installs; returns the new environment. BundleError on bad input,
    RuntimeError when installing failed (nothing is left of the attempt either way)."""
    started = time.monotonic()
    manifest = read_manifest(bundle)
    check_machine(manifest)
    check_files(bundle, manifest)
    prefix = (prefix or default_prefix(bundle, manifest)).expanduser().resolve()
    if bin_dir is not None:
        check_link(bin_dir)
    version = manifest["version"]
    log(f"installing {COMMAND} {version} for Python {manifest['python']} on {manifest['platform']} "
        f"into {prefix} (no network)")
    remove_unfinished(prefix)
    env = prefix / "envs" / f"{version}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    try:
        env.parent.mkdir(parents=True, exist_ok=True)
        venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt", clear=True).create(env)
        (env / INCOMPLETE).touch()
        log(f"  {len(manifest['files'])} files checked; installing {manifest['wheel_count']} wheels...")
        install_wheels(bundle, manifest, env)
        log(f"  {smoke_test(env)} starts")
        for line in copy_checkpoints(bundle, manifest, env):
            log(f"  {line}")
        (env / INCOMPLETE).unlink()
    except BaseException:
        shutil.rmtree(env, ignore_errors=True)
        raise
    switch_current(prefix, env)
    command = bin_dir_of(prefix / "current") / COMMAND
    if bin_dir is not None:
        command = link_command(prefix, bin_dir)
    log(f"installed in {time.monotonic() - started:.0f} s.")
    log(f"  start the app:          {command}")
    log(f"  serve a class:          {command} serve --bind 0.0.0.0:8501")
    log(f"  every command:          {command} --help")
    if bin_dir is not None and str(bin_dir) not in os.environ.get("PATH", "").split(os.pathsep):
        log(f"  ({bin_dir} is not on your PATH: add it, or use the full path above)")
    return env


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="install.sh", description="Install transformer-explained from this offline bundle, with no network.",
        epilog="Nothing is half-installed: a failed or interrupted installation removes what it made, and a "
               "previous installation keeps working until the new one is complete.")
    p.add_argument("bundle", type=Path, help="the bundle folder (install.sh passes its own)")
    p.add_argument("--prefix", type=Path, default=None,
                   help="where to install (default: your data folder, ~/.local/share/transformer-explained on "
                        "Linux; a school-wide place such as /opt/transformer-explained works too)")
    p.add_argument("--bin", type=Path, default=None, help="where to link the command (default ~/.local/bin)")
    p.add_argument("--no-link", action="store_true", help="do not link the command anywhere; its path is printed")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))    # cleaned up like Ctrl-C
    try:
        install(args.bundle.expanduser(), args.prefix, None if args.no_link else (args.bin or default_bin()))
    except BundleError as exc:
        print(f"install: error: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"install: error: {exc}; nothing was installed", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("install: interrupted; nothing was installed", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
