// Placeholder: watches of resources with no row (issue 18, part 1).
