"""What one request sends: a prompt (text or chat messages) and how many tokens to generate."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt: text (completions) or chat messages; either converts to the other."""

    text: str | None = None
    messages: tuple[tuple[str, str], ...] | None = None
    """(role, content) pairs."""

    def as_text(self) -> str:
        if self.text is not None:
            return self.text
        return "\n".join(content for _, content in self.messages or ())

    def as_messages(self) -> list[dict[str, str]]:
        if self.messages is not None:
            return [{"role": role, "content": content} for role, content in self.messages]
        return [{"role": "user", "content": self.text or ""}]


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One request to send."""

    prompt: Prompt
    output_tokens: int
    prompt_tokens: int | None = None
    """The prompt length asked for (server-counted when sized with its tokenizer); None when
    nothing was asked (a dataset prompt, a later turn that carries the model's answers)."""
    conversation: int | None = None
    """Which conversation this turn belongs to (multi-turn), else None."""
    turn: int = 0
    """0 for the first turn."""
    think_s: float = 0.0
    """Wait this long before sending (a user reading the previous answer)."""
    at_s: float | None = None
    """Trace or schedule: when to send, in seconds after the replay started."""
    task: str | None = None
    """The prompt's task kind (corpus tasks, ``random-words``, ``conversation`` turns)."""
