"""Pages for people: the health page of a table (`report.health_page`)."""
