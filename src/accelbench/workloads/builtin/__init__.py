"""The built-in workloads (MNIST, SimCLR, VAE, ResNet-50, VGG-16, BERT, nanoGPT-char, GPT-2,
Llama-1B) and what they share.
"""
