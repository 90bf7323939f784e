"""The one step model: the step book, each step's figures (ledger) and its typed result
(result), the knee rule."""
