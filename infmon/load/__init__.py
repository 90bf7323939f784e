"""infmon.load"""
