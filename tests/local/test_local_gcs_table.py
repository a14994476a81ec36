"""gcp-storage-emulator's table as the emulator keeps it (emulators/gcs.py `_storage`): in memory
the objects live in the table alone, without the JSON copy of the whole table the library writes
after every write; in files that copy is still written, and a new Storage reads the objects back."""

from __future__ import annotations

from vertex_trainer.emulators import gcs


def _fill(table) -> None:
    """A bucket with three objects, one of them then deleted."""
    table.create_bucket("b", {"name": "b"})
    for name in ("gone", "dir/one", "dir/two"):
        table.create_file("b", name, f"{name}!".encode(), {"name": name, "bucket": "b", "generation": "1"})
    table.delete_file("b", "gone")


def _live(table) -> dict[str, bytes]:
    """name -> content of every object listed in bucket b."""
    items, _ = table.get_file_list("b")
    return {item["name"]: table.get_file("b", item["name"]) for item in items}


def test_in_memory_the_objects_live_in_the_table_without_its_copy():
    table = gcs._storage(use_memory_fs=True)
    _fill(table)
    assert _live(table) == {"dir/one": b"dir/one!", "dir/two": b"dir/two!"}
    assert table.get_file_list("b", prefix="dir/", delimiter="/")[0][1]["name"] == "dir/two"
    # Where the library would keep the whole table as JSON, rewritten after each of those writes.
    assert not table._store.exists_file(".meta")


def test_in_files_the_table_is_still_written_and_a_new_storage_reads_it_back(tmp_path):
    _fill(gcs._storage(use_memory_fs=False, data_dir=str(tmp_path)))
    again = gcs._storage(use_memory_fs=False, data_dir=str(tmp_path))
    assert _live(again) == {"dir/one": b"dir/one!", "dir/two": b"dir/two!"}
