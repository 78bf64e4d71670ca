// Placeholder: the reflector-style consumer test (issue 18, part 6).
