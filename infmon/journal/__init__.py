"""infmon.journal"""
