// Placeholder: the resource catalog and its kinds (issue 18, part 1).
