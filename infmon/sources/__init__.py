"""infmon.sources"""
