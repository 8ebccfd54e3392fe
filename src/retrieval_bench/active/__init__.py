"""Active labelling: which queries people label next (a seeded Poisson plan whose inclusion
probabilities follow the predicted size of the judge's error), the estimates that stay valid
under that plan (inverse-probability-weighted prediction-powered inference), and the simulation
that measures both on a set whose labels are known."""
