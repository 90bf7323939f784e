"""The one step model: the step book, each step's figures (ledger), the knee rule."""
