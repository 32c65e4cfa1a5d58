"""sim/_kernels"""
