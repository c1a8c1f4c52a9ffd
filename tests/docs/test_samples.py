"""The bundled samples say what they are: the default is a real recorded run, the seed log is synthetic."""

from tui.core.records import LineIssue, QueueSample, RequestRecord, RunHeader, read_file
from tui.samples import default_sample, sample_path


def test_default_sample_is_a_real_labelled_run():
    assert default_sample().endswith("default.jsonl")
    items = list(read_file(default_sample()))
    assert not [i for i in items if isinstance(i, LineIssue)]
    header = items[0]
    assert isinstance(header, RunHeader) and header.synthetic is False
    env = header.data["environment"]
    assert env["server"]["engine"] == "llamacpp" and env["gpu"]["gpu"] == "none"
    reqs = [r for r in items if isinstance(r, RequestRecord)]
    assert len(reqs) >= 150 and len({r.id for r in reqs}) == len(reqs)
    assert {r.level for r in reqs if r.phase == "measure"} == {1.0, 2.0, 4.0, 8.0, 16.0, 32.0}
    assert any(isinstance(q, QueueSample) and q.source == "llamacpp" and q.waiting for q in items)


def test_seed_sample_is_labelled_synthetic():
    header = next(iter(read_file(sample_path("seed.jsonl"))))
    assert isinstance(header, RunHeader) and header.synthetic is True
