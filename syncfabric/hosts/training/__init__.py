"""Training on the host side: the digits MLP and its SGD arithmetic (digits_mlp), the
training loop of a user's script through a job (job_training), and the Gloo reference
ranks the experiments measure against (gloo_peers, gloo_training). It may import the job
engine (jobs), packets and the hosts' argument helpers (cli)."""
