"""GitHub publishers (PyGithub): sticky PR comment, check run / commit status, badge branch,
repository_dispatch sender and receiver. Never imports torch."""
