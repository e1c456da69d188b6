(Cologne|Berlin|Bonn|Munich)
