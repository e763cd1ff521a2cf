"""The SPARK_HOME view that lets Spark's Python processes import the installed,
byte-compiled pyspark instead of compiling pyspark.zip at every start."""

from __future__ import annotations

import os
from pathlib import Path

from workers.pipeline.spark_home import spark_home_view, use_compiled_pyspark


def pip_pyspark(root: Path) -> Path:
    """The shape of pip's pyspark package: scripts, jars, and the zips of sources."""
    package = root / "site-packages" / "pyspark"
    for name in ("bin/spark-submit", "jars/spark-core.jar", "python/lib/pyspark.zip",
                 "python/lib/py4j-src.zip", "__init__.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(name)
    return package


def test_the_view_has_everything_but_the_zips_and_is_made_once(tmp_path):
    package = pip_pyspark(tmp_path)
    view = spark_home_view(package, "4.3.0", tmp_path / "cache")
    assert view is not None
    assert sorted(entry.name for entry in view.iterdir()) == ["__init__.py", "bin", "jars"]
    assert (view / "bin" / "spark-submit").read_text() == "bin/spark-submit"
    assert not (view / "python" / "lib" / "pyspark.zip").exists()
    assert spark_home_view(package, "4.3.0", tmp_path / "cache") == view
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [view.name]  # no drafts left
    assert spark_home_view(package, "4.3.1", tmp_path / "cache") != view


def test_no_view_for_a_package_without_the_zip(tmp_path):
    package = pip_pyspark(tmp_path)
    (package / "python" / "lib" / "pyspark.zip").unlink()
    assert spark_home_view(package, "4.3.0", tmp_path / "cache") is None


def test_a_spark_home_set_by_the_user_is_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark-4.3.0-bin"))
    use_compiled_pyspark()
    assert os.environ["SPARK_HOME"] == str(tmp_path / "spark-4.3.0-bin")


def test_spark_python_workers_import_the_installed_pyspark(spark):
    def where(_: object) -> list[str]:
        import pyspark
        return [pyspark.__file__]

    files = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    assert files and ".zip" not in files[0], files
