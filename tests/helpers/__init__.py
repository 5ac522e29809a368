"""Code the tests share: crafted inputs, probes that run in workers, readers of pages and charts."""
