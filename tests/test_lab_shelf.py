"""serving/lab_shelf.py: a student's lab models are their own, bounded, published only by their teacher,
and no name or id reaches outside the shelf."""
from __future__ import annotations

import errno
from pathlib import Path

import pytest

from serving.lab_shelf import FOLDER, PUBLISHED, LabShelf, ShelfRefused

CLASS, ANA, BEN = "K7M2Q9", "a1b2c3d4e5f6", "0f0e0d0c0b0a"


def writer(size: int = 1000):
    """What the lab's save does: a checkpoint directory (config.json and weights), written at once."""
    def write(target: Path) -> Path:
        target.mkdir()
        (target / "config.json").write_text("{}")
        (target / "model.safetensors").write_bytes(b"x" * size)
        return target
    return write


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_students_model_is_theirs_until_the_teacher_publishes_it(tmp_path):
    shelf = LabShelf(tmp_path)
    shelf.save(CLASS, ANA, "reverse-1", writer())
    assert [e.name for e in shelf.visible(CLASS, ANA)] == ["reverse-1"]
    assert shelf.visible(CLASS, BEN) == []                               # another student: nothing
    assert [e.owner for e in shelf.group(CLASS)] == [ANA]                # the teacher: all of the class
    shelf.publish(CLASS, ANA, "reverse-1")
    assert [(e.name, e.published) for e in shelf.visible(CLASS, BEN)] == [("reverse-1", True)]
    assert shelf.visible("OTHER1", BEN) == []                            # another class: nothing
    shelf.publish(CLASS, ANA, "reverse-1", on=False)
    assert shelf.visible(CLASS, BEN) == []


def test_each_student_keeps_at_most_per_owner_models_and_is_told(tmp_path):
    shelf = LabShelf(tmp_path, per_owner=2)
    shelf.save(CLASS, ANA, "a", writer())
    shelf.save(CLASS, ANA, "b", writer())
    with pytest.raises(ShelfRefused, match="2 saved lab models"):
        shelf.save(CLASS, ANA, "c", writer())
    shelf.save(CLASS, BEN, "c", writer())                                # another student's count is theirs
    shelf.delete(CLASS, ANA, "a")
    shelf.save(CLASS, ANA, "c", writer())
    assert sorted(e.name for e in shelf.owned(CLASS, ANA)) == ["b", "c"]


def test_the_shelf_is_bounded_in_bytes(tmp_path):
    shelf = LabShelf(tmp_path, max_bytes=2500)
    shelf.save(CLASS, ANA, "a", writer(1000))
    shelf.save(CLASS, BEN, "b", writer(1000))
    with pytest.raises(ShelfRefused, match="full"):
        shelf.save(CLASS, ANA, "c", writer(1000), estimate=1000)
    assert shelf.used_bytes() == 2 * (1000 + 2)


def test_a_name_taken_by_the_student_or_a_shipped_model_is_refused(tmp_path):
    shelf = LabShelf(tmp_path)
    shelf.save(CLASS, ANA, "mine", writer())
    with pytest.raises(ShelfRefused, match="exists already"):
        shelf.save(CLASS, ANA, "mine", writer())
    with pytest.raises(ShelfRefused, match="exists already"):
        shelf.save(CLASS, BEN, "multi30k-en-de", writer(), taken=lambda n: n == "multi30k-en-de")


def test_old_unpublished_models_are_swept_published_ones_kept(tmp_path):
    clock = Clock()
    shelf = LabShelf(tmp_path, keep_seconds=3600, clock=clock)
    shelf.save(CLASS, ANA, "old", writer())
    shelf.save(CLASS, BEN, "shown", writer())
    shelf.publish(CLASS, BEN, "shown")
    clock.now = Path(tmp_path / FOLDER / CLASS / ANA / "old").stat().st_mtime + 3601
    assert [e.name for e in shelf.sweep()] == ["old"]
    assert [e.name for e in shelf.group(CLASS)] == ["shown"]


HOSTILE = ["..", ".", "../x", "../../etc", "/etc/passwd", "a/../../b", "a/b", "a\\b", "-rf", ".hidden", "",
           "x" * 65, "a\x00b", "a\nb", "ab\n", "ü", "名前", "con ", " a", "a b", "%2e%2e", "~root"]


@pytest.mark.parametrize("name", HOSTILE)
def test_no_hostile_name_or_id_reaches_outside_the_shelf(tmp_path, name):
    shelf = LabShelf(tmp_path / "checkpoints")
    outside = set(tmp_path.rglob("*"))
    for call in (lambda: shelf.save(CLASS, ANA, name, writer()), lambda: shelf.save(name, ANA, "m", writer()),
                 lambda: shelf.save(CLASS, name, "m", writer()), lambda: shelf.publish(CLASS, ANA, name),
                 lambda: shelf.delete(name, ANA, "m"), lambda: shelf.delete(CLASS, name, "m"),
                 lambda: shelf.visible(name, ANA), lambda: shelf.group(name)):
        with pytest.raises(ShelfRefused):
            call()
    assert set(tmp_path.rglob("*")) == outside                            # nothing written anywhere


def test_a_symlink_planted_in_the_shelf_is_neither_listed_nor_followed_by_delete(tmp_path):
    shelf = LabShelf(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "config.json").write_text("{}")
    (tmp_path / FOLDER / CLASS / ANA).mkdir(parents=True)
    (tmp_path / FOLDER / CLASS / ANA / "link").symlink_to(victim)
    assert shelf.owned(CLASS, ANA) == []
    with pytest.raises(ShelfRefused):
        shelf.delete(CLASS, ANA, "link")
    assert (victim / "config.json").exists()


def test_a_disk_that_fills_during_a_save_leaves_nothing_behind_and_says_so(tmp_path):
    shelf = LabShelf(tmp_path)

    def full(target: Path) -> Path:
        tmp = target.parent / f".{target.name}.abc123"        # as save_checkpoint's temporary directory
        tmp.mkdir()
        (tmp / "model.safetensors").write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(ShelfRefused, match="No space left on device.*nothing was kept"):
        shelf.save(CLASS, ANA, "m", full)
    assert [p.name for p in (tmp_path / FOLDER / CLASS / ANA).iterdir()] == []
    assert shelf.owned(CLASS, ANA) == []
    assert not (tmp_path / FOLDER / CLASS / ANA / "m" / PUBLISHED).exists()
