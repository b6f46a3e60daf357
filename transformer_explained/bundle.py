"""Write an offline bundle: a folder that installs transformer-explained on a machine with no network.

    transformer-explained bundle --out school-bundle
    transformer-explained bundle --out school-bundle --python 3.12 --platform linux-aarch64
    transformer-explained bundle --out school-bundle --checkpoint my-model --archive

Run it on a machine with internet (or a package mirror). The folder holds every wheel the project needs
for the stated Python and platform (the CPU build of torch among them), the project's own wheel with
the shipped Multi30K models, any of your checkpoints named with --checkpoint, bundle.json (what is in
it, with checksums) and install.sh. On the school machine, with no network:

    sh school-bundle/install.sh          # then: transformer-explained  (or: transformer-explained serve)

Versions: the bundle pins every package to the version installed where you run this command (the
versions you tested), unless --no-pin; torch is the CPU build of the installed torch's version, unless
--torch VERSION. pip's own configuration (indexes, find-links) is used to fetch; when the CPU build of
torch is not found there, the PyTorch CPU index is tried (--torch-index).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from model.commands import registry as command
from model.storage import places
from model.storage.checkpoint import CheckpointError, load_checkpoint
from transformer_explained import install_bundle, version
from transformer_explained.install_bundle import FORMAT, MANIFEST, BundleError

PROJECT = "transformer-explained"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# The files of a checkout the project's wheel is built from (a copy of them: a build inside the
# checkout would leave build/ behind in it).
SOURCES = ("pyproject.toml", "README.md", ".streamlit", "i18n", "model", "app", "figures", "serving",
           "webpage", "transformer_explained", "checkpoints/multi30k-en-de", "checkpoints/multi30k-de-en")


@dataclass(frozen=True)
class Platform:
    pip_tags: tuple[str, ...]        # pip download --platform, each (pip widens manylinux / macOS versions)
    torch_local: str | None          # the local version label of torch's CPU build there ("cpu"), or none


PLATFORMS = {
    "linux-x86_64": Platform(("manylinux_2_28_x86_64", "manylinux2014_x86_64", "linux_x86_64"), "cpu"),
    "linux-aarch64": Platform(("manylinux_2_28_aarch64", "manylinux2014_aarch64", "linux_aarch64"), "cpu"),
    "macos-arm64": Platform(("macosx_14_0_arm64",), None),
}


class BundleMakeError(Exception):
    """The bundle cannot be made; one line saying why and what to do."""


# ---------------------------------------------------------------- what goes in

def build_project_wheel(out: Path, root: Path = places.ROOT) -> Path:
    """The project's wheel, built from a copy of a checkout's sources."""
    with tempfile.TemporaryDirectory(prefix="transformer-wheel-") as tmp:
        source = Path(tmp)
        for name in SOURCES:
            if (root / name).is_dir():
                shutil.copytree(root / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                (source / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / name, source / name)
        isolation = ["--no-build-isolation"] if has_setuptools() else []    # else pip fetches setuptools
        run_pip(["wheel", "--no-deps", *isolation, "-w", str(out), str(source)],
                f"the project's wheel could not be built from {root}")
    return next(out.glob("transformer_explained-*.whl"))


def has_setuptools(least: int = 68) -> bool:
    try:
        return int(metadata.version("setuptools").split(".")[0]) >= least
    except (metadata.PackageNotFoundError, ValueError):
        return False


def project_wheel(out: Path, given: Path | None) -> Path:
    """--wheel as given; from a checkout, built; installed from a package, fetched by its version."""
    if given is not None:
        if not given.is_file() or not given.name.startswith("transformer_explained-") or given.suffix != ".whl":
            raise BundleMakeError(f"--wheel {given}: not a wheel of {PROJECT} (transformer_explained-*.whl)")
        return Path(shutil.copy2(given, out))
    if places.in_checkout():
        return build_project_wheel(out)
    run_pip(["download", "--no-deps", "-d", str(out), f"{PROJECT}=={version()}"],
            f"{PROJECT} {version()} is not on your package index: give its wheel with --wheel FILE")
    return next(out.glob("transformer_explained-*.whl"))


def installed_pins() -> dict[str, str]:
    """The version of every distribution installed here, by canonical name, except the project itself
    and torch (chosen apart: its CPU build) and local builds."""
    pins = {}
    for dist in metadata.distributions():
        name = canonical(dist.metadata["Name"] or "")
        if name and name not in (PROJECT, "torch") and "+" not in dist.version:
            pins[name] = dist.version
    return pins


def torch_requirement(platform: str, torch_version: str | None) -> str:
    if torch_version is None:
        try:
            torch_version = metadata.version("torch")
        except metadata.PackageNotFoundError:
            raise BundleMakeError("torch is not installed here: give its version with --torch VERSION") from None
    public = torch_version.split("+")[0]
    local = PLATFORMS[platform].torch_local
    return f"torch=={public}+{local}" if local else f"torch=={public}"


def target_flags(platform: str, python: str) -> list[str]:
    """pip's flags for wheels of another Python and platform than the running one."""
    digits = python.replace(".", "")
    flags = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp",
             "--abi", f"cp{digits}", "--abi", "abi3", "--abi", "none"]
    for tag in PLATFORMS[platform].pip_tags:
        flags += ["--platform", tag]
    return flags + ["--platform", "any"]


def run_pip(args: list[str], failure: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args, "--disable-pip-version-check"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        errors = [line.strip() for line in done.stdout.splitlines() if line.strip().startswith("ERROR")]
        telling = [e for e in errors if "No matching distribution" in e or "Could not find" in e] or errors[-1:]
        raise BundleMakeError(f"{failure} ({(telling or ['pip failed'])[0]})")


def download_torch(wheels: Path, requirement: str, flags: list[str], torch_index: str | None) -> None:
    """The CPU build of torch: from pip's configured sources, else from the PyTorch CPU index."""
    base = ["download", "--no-deps", "-d", str(wheels), *flags, requirement]
    try:
        run_pip(base, "")
    except BundleMakeError:
        if not torch_index:
            raise BundleMakeError(f"{requirement} was not found in pip's sources: give --torch-index URL") from None
        run_pip([*base, "--extra-index-url", torch_index],
                f"{requirement} was found neither in pip's sources nor at {torch_index}")


def target_environment(platform: str, python: str) -> dict[str, str]:
    """The values environment markers (PEP 508) take on the school machine. pip evaluates markers
    for the machine it runs on even with --platform, so the bundle walks the requirements itself."""
    system, machine = platform.split("-", 1)
    system_name = {"linux": "Linux", "macos": "Darwin"}[system]
    return {"python_version": python, "python_full_version": f"{python}.0", "os_name": "posix",
            "sys_platform": {"linux": "linux", "macos": "darwin"}[system], "platform_system": system_name,
            "platform_machine": machine, "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "implementation_version": f"{python}.0",
            "platform_release": "", "platform_version": "", "extra": ""}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode("utf-8")
    return [Requirement(line.split(":", 1)[1].strip()) for line in text.splitlines()
            if line.startswith("Requires-Dist:")]


def download_dependencies(wheels: Path, roots: list[str], flags: list[str], env: dict[str, str],
                          pins: dict[str, str]) -> None:
    """Every wheel `roots` need on the target, walked level by level: each requirement whose markers
    hold there, at the version pinned here when that satisfies it, fetched with --no-deps."""
    have: dict[str, Path] = {}                 # canonical name -> its wheel in the bundle
    expanded: dict[str, set[str]] = {}         # whose requirements (base "", extras) were added
    pending = [Requirement(r) for r in roots]
    while pending:
        have.update((canonical(w.name.split("-")[0]), w) for w in wheels.glob("*.whl"))
        fetch, later = [], []
        for req in pending:
            name = canonical(req.name)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            if name not in have:
                pinned = pins.get(name)
                fetch.append(f"{name}=={pinned}" if pinned and req.specifier.contains(pinned, prereleases=True)
                             else f"{name}{req.specifier}")
                later.append(req)                   # walked once its wheel is here
                continue
            new = ({""} | set(req.extras)) - expanded.setdefault(name, set())
            expanded[name] |= new
            later += [Requirement(str(dep).split(";")[0]) for dep in wheel_requirements(have[name]) if new and (
                dep.marker is None or any(dep.marker.evaluate({**env, "extra": e}) for e in new))]
        if fetch:
            run_pip(["download", "--no-deps", "-d", str(wheels), "--find-links", str(wheels), *flags,
                     *sorted(set(fetch))],
                    "not every dependency has a wheel for that Python and platform (--no-pin lets pip choose "
                    "versions that do)")
            missing = {canonical(Requirement(f).name) for f in fetch} - {canonical(w.name.split("-")[0])
                                                                       for w in wheels.glob("*.whl")}
            if missing:
                raise BundleMakeError(f"pip fetched no wheel named {', '.join(sorted(missing))}")
        pending = later


def copy_checkpoints(out: Path, names: list[str]) -> list[str]:
    copied = []
    for name in names:
        path = places.resolve(name)
        try:
            load_checkpoint(path)
        except CheckpointError as exc:
            raise BundleMakeError(f"--checkpoint {name}: {exc}") from None
        shutil.copytree(path, out / "checkpoints" / path.name, ignore=shutil.ignore_patterns(".*"))
        copied.append(path.name)
    return copied


def offline_user(home: Path) -> dict[str, str]:
    """The environment of a new user on a machine with no network, for trying a bundle here (the
    test and benchmarks/bundle_install.py): a fresh home, every proxy dead, no pip configuration,
    the system's own Python first on PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON")) and k != places.ENV}
    dead = "http://127.0.0.1:9"
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"), http_proxy=dead, https_proxy=dead,
               HTTP_PROXY=dead, HTTPS_PROXY=dead, PIP_CONFIG_FILE=os.devnull, HF_HUB_OFFLINE="1",
               PATH="/usr/sbin:/usr/bin:/sbin:/bin")
    return env


# ---------------------------------------------------------------- the bundle's own files

def install_script(python: str, project: str) -> str:
    return f"""#!/bin/sh
# Installs {PROJECT} from this folder, with no network. Options: sh install.sh --help
# Another Python {python}: PYTHON=/path/to/python{python} sh install.sh
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -f "$here/wheels/{project}" ]; then
  echo "install: error: $here is not a whole bundle (wheels/{project} is missing): copy the whole folder again" >&2
  exit 2
fi
py=${{PYTHON:-}}
if [ -z "$py" ]; then
  for candidate in python{python} python3 python; do
    if command -v "$candidate" >/dev/null 2>&1; then py=$candidate; break; fi
  done
fi
if [ -z "$py" ]; then
  echo "install: error: no Python found: install Python {python}, or give it as PYTHON=/path/to/python{python}" >&2
  exit 2
fi
if ! "$py" -c "import sys; sys.exit(sys.version_info[:2] != ({python.replace('.', ', ')}))" >/dev/null 2>&1; then
  v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo "unknown")
  case $v in 3.1[1-9]|3.[2-9][0-9]) other=", or make a bundle with --python $v";; *) other="";; esac
  echo "install: error: this bundle is for Python {python}; $py is Python $v: run it with Python {python}" \
       "(PYTHON=/path/to/python{python} sh install.sh)$other" >&2
  exit 2
fi
PYTHONSAFEPATH=1 PYTHONPATH="$here/wheels/{project}" exec "$py" -m transformer_explained.install_bundle "$here" "$@"
"""


def readme(manifest: dict) -> str:
    return f"""{PROJECT} {manifest['version']}: an offline bundle for Python {manifest['python']} on \
{manifest['platform']}

Install (no network needed; about 1-2 minutes; nothing is half-installed if it stops):
    sh install.sh                      # into ~/.local/share/transformer-explained, command in ~/.local/bin
    sh install.sh --prefix /opt/transformer-explained --bin /usr/local/bin     # for every user (as root)
    sh install.sh --help

Then:
    transformer-explained              # the app, in your browser
    transformer-explained serve --bind 0.0.0.0:8501     # a class (HAProxy in front when installed)

Made with: {manifest['command']}
Holds {manifest['wheel_count']} wheels ({manifest['size_mb']} MB): see bundle.json.
"""


def manifest_files(out: Path) -> dict[str, dict]:
    return {p.relative_to(out).as_posix(): {"size": p.stat().st_size, "sha256": install_bundle.sha256(p)}
            for p in sorted(out.rglob("*")) if p.is_file() and p.name != MANIFEST}


def highest_glibc(wheels: Path) -> list[int] | None:
    found = [tuple(map(int, m)) for w in wheels.glob("*.whl") for m in re.findall(r"manylinux_(\d+)_(\d+)", w.name)]
    found += [(2, 17) for w in wheels.glob("*.whl") if "manylinux2014" in w.name]
    return list(max(found)) if found else None


# ---------------------------------------------------------------- making it

def make(out: Path, platform: str, python: str, *, checkpoints: list[str], pin: bool, torch_version: str | None,
         torch_index: str | None, wheel: Path | None, argv: list[str], log=print) -> dict:
    """Writes the bundle into `out` (made beside it, then renamed: a failed run leaves nothing)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleMakeError(f"{out} already exists: give a new folder with --out")
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent if out.parent.is_dir() else None))
    try:
        wheels = work / "wheels"
        wheels.mkdir()
        log(f"the project's wheel ({'built from this checkout' if places.in_checkout() and not wheel else 'given'})...")
        project = project_wheel(wheels, wheel)
        flags = target_flags(platform, python)
        torch = torch_requirement(platform, torch_version)
        log(f"{torch} for Python {python} on {platform}...")
        download_torch(wheels, torch, flags, torch_index)
        log("every other dependency" + (" (pinned to the versions installed here)..." if pin else "..."))
        download_dependencies(wheels, [f"{PROJECT}=={version_of(project)}", torch, "pip"], flags,
                              target_environment(platform, python), installed_pins() if pin else {})
        names = copy_checkpoints(work, checkpoints)
        pip_wheel = next(wheels.glob("pip-*.whl")).name
        (work / "install.sh").write_text(install_script(python, project.name))
        (work / "install.sh").chmod(0o755)
        files = manifest_files(work)
        manifest = {"format": FORMAT, "project": PROJECT, "version": version_of(project), "python": python,
                    "platform": platform, "glibc": highest_glibc(wheels) if platform.startswith("linux") else None,
                    "torch": torch.split("==")[1], "project_wheel": project.name, "pip_wheel": pip_wheel,
                    "requirements": [f"{PROJECT}=={version_of(project)}", "pip"], "checkpoints": names,
                    "wheel_count": sum(1 for _ in wheels.glob("*.whl")),
                    "size_mb": round(sum(f["size"] for f in files.values()) / 1e6, 1),
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "command": " ".join([command.prog("transformer_explained.bundle"), *argv]), "files": files}
        (work / "README.txt").write_text(readme(manifest))
        manifest["files"] = manifest_files(work)
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if out.exists():
            out.rmdir()
        os.replace(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    seconds = time.monotonic() - started
    log(f"wrote {out}: {manifest['wheel_count']} wheels, {manifest['size_mb']} MB, in {seconds:.0f} s")
    return manifest


def version_of(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def archive(out: Path) -> Path:
    """OUT.tar.gz beside the folder (unpacked with `tar xzf`)."""
    path = out.with_name(out.name + ".tar.gz")
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        tar.add(out, arcname=out.name)
    return path


def this_platform() -> str | None:
    name = install_bundle.machine_platform()
    return name if name in PLATFORMS else None


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=command.prog("transformer_explained.bundle"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="the folder to write (must not exist, or be empty)")
    p.add_argument("--platform", choices=sorted(PLATFORMS), default=this_platform(),
                   help=f"the school machine's platform (default: this one, {this_platform()})")
    p.add_argument("--python", default=install_bundle.python_tag(),
                   help=f"the school machine's Python, major.minor (default: this one, {install_bundle.python_tag()})")
    p.add_argument("--checkpoint", action="append", default=[], metavar="NAME_OR_DIR",
                   help="one of your checkpoints to carry along (repeatable); the shipped ones are always in")
    p.add_argument("--no-pin", dest="pin", action="store_false",
                   help="let pip choose the newest versions allowed, not the ones installed here")
    p.add_argument("--torch", dest="torch_version", default=None, metavar="VERSION",
                   help="torch version (default: the one installed here; always its CPU build)")
    p.add_argument("--torch-index", default=TORCH_CPU_INDEX,
                   help=f"where the CPU build of torch is when pip's sources lack it (default {TORCH_CPU_INDEX})")
    p.add_argument("--wheel", type=Path, default=None,
                   help="the project's wheel (default: built from this checkout, or fetched by version)")
    p.add_argument("--archive", action="store_true", help="also write OUT.tar.gz, one file to carry")
    args = p.parse_args(argv)
    if args.platform is None:
        p.error(f"this machine ({install_bundle.machine_platform()}) is not one a bundle can be made for: "
                f"give --platform ({', '.join(sorted(PLATFORMS))})")
    if not re.fullmatch(r"3\.\d+", args.python):
        p.error(f"--python {args.python}: give major.minor, e.g. 3.11")
    if tuple(map(int, args.python.split("."))) < (3, 11):
        p.error(f"--python {args.python}: {PROJECT} needs Python 3.11 or newer")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    log = lambda text: print(text, file=sys.stderr, flush=True)   # noqa: E731
    try:
        make(args.out.resolve(), args.platform, args.python, checkpoints=args.checkpoint, pin=args.pin,
             torch_version=args.torch_version, torch_index=args.torch_index, wheel=args.wheel, argv=argv, log=log)
    except (BundleMakeError, BundleError) as exc:
        print(f"{command.prog('transformer_explained.bundle')}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; nothing was written", file=sys.stderr)
        return 130
    if args.archive:
        log(f"wrote {archive(args.out.resolve())}")
    log(f"on the school machine: sh {args.out}/install.sh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
