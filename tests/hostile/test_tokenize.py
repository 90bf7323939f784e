"""A hostile ``/tokenize`` (#27, finding 8).

Before, a tokenizer answering 15 MB per call stalled start-up for over 150 s (377 MB, no
output), and one whose counts never grow was refused with "the corpus has no passage long
enough for 128 tokens", which did not say who counted. Now an answer is bounded by its
request's size and the calls by a deadline, and both messages name the endpoint.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.kit import assert_clean_run, bench
from tests.hostile.server import serve

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("huge-tokenize", "/tokenize: answered over"),
        ("lying-tokenize", "as counted by exact (the server's /tokenize"),
    ],
)
def test_a_hostile_tokenizer_is_one_line_naming_it(tmp_path: Path, mode: str, says: str) -> None:
    with serve(mode) as (url, srv):
        ran = bench(url, tmp_path / "s", "--prompt-tokens", "128", home=tmp_path, timeout_s=60)
    assert ran.returncode == 2, ran.show()
    assert_clean_run(ran, 200.0)
    assert says in ran.stderr and ran.stderr.count("\n") == 1, ran.stderr
    assert ran.elapsed_s < 30
    assert not srv.log.load, "load was sent with prompts sized by a hostile tokenizer"
