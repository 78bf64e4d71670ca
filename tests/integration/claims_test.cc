// Placeholder: tests for what the README claims (issue 19, part 5).
