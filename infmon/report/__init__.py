"""infmon.report"""
