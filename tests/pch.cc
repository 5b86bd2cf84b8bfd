// Compiled only to produce the precompiled GoogleTest headers that every uwarp_test reuses.
