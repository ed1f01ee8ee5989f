"""What scan reads, made readable: files, globs, .gz, stdin, UTF-16, binary files skipped, huge lines cut,
a growing file or a command followed, and what happened reading them (see borrowguard.scan)."""
