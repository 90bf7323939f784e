"""infmon.sim"""
