"""Tests of tokfst_cli.maxmatch: T_Aho, the WordPiece text transducer and canonical MaxMatch promotion."""
