"""The loopback Hugging Face Hub: the demo's own (tui.demo.hub), one implementation."""

from tui.demo.hub import HubServer, HubState, StoredFile, git_blob_id, upload_mode

__all__ = ["HubServer", "HubState", "StoredFile", "git_blob_id", "upload_mode"]
