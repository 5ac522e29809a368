"""The code page's sections, by key, in the paper's order, without torch (a server's first page reads them):
code_tour.py pairs each with the code it shows."""

# The embeddings (3.4) and positions (3.5), attention (3.2.1-2) and its masks, the position-wise feed-forward network
# (3.3), the residual connections with layer normalisation (3.1), the two layers and their stacks, the generator
# (3.4), and greedy decoding.
KEYS = ("embeddings", "attention", "multi_head", "masks", "feed_forward", "residual", "encoder_layer", "decoder_layer",
        "generator", "greedy")
