"""SSH sessions, the on-box probe and the pollers that drive them. No Textual."""
