"""What a load run sends, as pure data: prompts and lengths, the built-in corpus, shared
prefixes, conversations, arrival traces and schedules. No I/O beyond reading the files named
by the operator; sizing prompts with the server's tokenizer is ``infmon.load.tokenize``, and
the stateful source the driver pulls from is ``infmon.load.feed``."""

from infmon.load.workload.datasets import DatasetError, load_dataset
from infmon.load.workload.items import Prompt, WorkItem
from infmon.load.workload.lengths import LengthError, Lengths, fixed, parse_lengths

__all__ = [
    "DatasetError",
    "LengthError",
    "Lengths",
    "Prompt",
    "WorkItem",
    "fixed",
    "load_dataset",
    "parse_lengths",
]
