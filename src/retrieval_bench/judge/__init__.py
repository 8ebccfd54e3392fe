"""A model judge for the passages people left unlabelled: grade a judgment pool with a chat
model (`openai`, any OpenAI-compatible endpoint) or a cross-encoder (`cross_encoder`), measure
the judge against the labels people gave (`calibrate`), and estimate metrics three ways:
people's labels only, people's plus the judge's, and prediction-powered (`estimates`).
`python -m run.judge` is the command."""
