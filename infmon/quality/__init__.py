"""infmon.quality"""
