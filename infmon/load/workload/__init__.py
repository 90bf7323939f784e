"""What a load run sends, as pure data: prompts, the built-in corpus, shared prefixes,
conversations and arrival traces. No I/O beyond reading the files named by the operator;
length distributions and schedules are ``infmon.model.shape.lengths`` and
``infmon.model.shape.schedule`` (the Config parses them); sizing prompts with the server's
tokenizer is ``infmon.load.tokenize``, and the stateful source the driver pulls from is
``infmon.load.feed``."""

from infmon.load.workload.datasets import DatasetError, load_dataset
from infmon.load.workload.items import Prompt, WorkItem

__all__ = [
    "DatasetError",
    "Prompt",
    "WorkItem",
    "load_dataset",
]
