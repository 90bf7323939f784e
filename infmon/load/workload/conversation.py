"""Multi-turn conversations as pure values: each turn appends the model's answer and a new
user turn, so turn k+1's prompt starts with everything turn k sent and received (the prefix
cache's main customer in real chat traffic)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from infmon.load.workload.items import Prompt


@dataclass(frozen=True, slots=True)
class Conversation:
    conversation_id: int
    turns: int
    """How many user turns it has in all."""
    messages: tuple[tuple[str, str], ...] = ()
    """(role, content): an optional system turn, then user and assistant turns."""
    sent: int = 0
    """User turns sent so far."""

    @property
    def done(self) -> bool:
        return self.sent >= self.turns

    @property
    def awaiting_answer(self) -> bool:
        return bool(self.messages) and self.messages[-1][0] == "user"

    def ask(self, content: str) -> Conversation:
        """The next user turn (after the previous turn's answer was added)."""
        if self.awaiting_answer:
            raise ValueError("the previous turn has no answer yet")
        if self.done:
            raise ValueError("the conversation has no turns left")
        return replace(self, messages=(*self.messages, ("user", content)), sent=self.sent + 1)

    def answer(self, content: str) -> Conversation:
        """The model's answer to the last user turn."""
        if not self.awaiting_answer:
            raise ValueError("no user turn is waiting for an answer")
        return replace(self, messages=(*self.messages, ("assistant", content)))

    def prompt(self, chat: bool) -> Prompt:
        """Chat: the messages. Completions: the transcript as one text, in which each answer
        follows its prompt directly (the model continued it) and the next turn starts after a
        blank line."""
        if chat:
            return Prompt(messages=self.messages)
        parts = []
        for role, content in self.messages:
            parts.append(content + "\n\n" if role == "assistant" else content)
        return Prompt(text="".join(parts))


def start(conversation_id: int, turns: int, system: str | None = None) -> Conversation:
    messages = (("system", system),) if system else ()
    return Conversation(conversation_id, turns, messages)
