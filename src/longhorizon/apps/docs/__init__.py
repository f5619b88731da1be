"""The docs app: Word documents (.docx) in the workspace, edited paragraph by paragraph."""
