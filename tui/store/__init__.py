"""The panel's own files on the user's machine: where they live, the append-only
JSONL stores (cost ledger, action journal). I/O, no Textual, no network."""
