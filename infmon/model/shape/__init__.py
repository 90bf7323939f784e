"""The shape of the load the Config asks for: token lengths, arrival schedules, their files."""
